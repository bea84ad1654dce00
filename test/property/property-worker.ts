import { parentPort, workerData } from 'node:worker_threads';
import { PROPERTIES, type PropertyName } from './properties.ts';

/** Runs one property off the main thread (invariants.test.ts uses the second core) and reports back. */
export interface WorkerRequest {
  property: PropertyName;
  runs: number;
}

export type WorkerReply = { ok: true; summary: string } | { ok: false; message: string };

const request = workerData as WorkerRequest;
let reply: WorkerReply;
try {
  reply = { ok: true, summary: await PROPERTIES[request.property](request.runs) };
} catch (error) {
  reply = { ok: false, message: error instanceof Error ? error.message : String(error) };
}
parentPort?.postMessage(reply);
