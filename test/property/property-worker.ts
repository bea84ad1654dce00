import { parentPort, workerData } from 'node:worker_threads';
import { PROPERTIES, type PropertyName } from './properties.ts';

/** Runs properties off the main thread (invariants.test.ts uses the second core) and reports each. */
export interface WorkerRequest {
  properties: PropertyName[];
  runs: number;
}

export type WorkerReply = { property: PropertyName } & ({ ok: true; summary: string } | { ok: false; message: string });

const request = workerData as WorkerRequest;
for (const property of request.properties) {
  let reply: WorkerReply;
  try {
    reply = { property, ok: true, summary: await PROPERTIES[property](request.runs) };
  } catch (error) {
    reply = { property, ok: false, message: error instanceof Error ? error.message : String(error) };
  }
  parentPort?.postMessage(reply);
}
