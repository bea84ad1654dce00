// The network lab is product code (the bench runs on it); tests use the same driver.
export { NetLab, type HostSet, type LabHost, type LabInfo } from '../../src/bench/network-lab.ts';
