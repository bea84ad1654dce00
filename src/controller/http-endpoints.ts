import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export interface Endpoints {
  registry: Registry;
  /** Problems that make the replica unready (empty: ready). */
  readiness: () => Promise<string[]>;
}

/**
 * /metrics for Prometheus, /healthz (the process answers) and /readyz (the store answers and every
 * lease held is renewed in time), on one listener. Resolves once listening; rejects on a listen
 * error (an address in use).
 */
export async function serveEndpoints(host: string, port: number, endpoints: Endpoints): Promise<Server> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const send = (status: number, body: string, type = 'text/plain; charset=utf-8'): void => {
      response.writeHead(status, { 'content-type': type });
      response.end(body);
    };
    const answer = async (): Promise<void> => {
      if (path === '/metrics') {
        send(200, await endpoints.registry.metrics(), endpoints.registry.contentType);
      } else if (path === '/healthz') {
        send(200, 'ok\n');
      } else if (path === '/readyz') {
        const problems = await endpoints.readiness();
        send(problems.length === 0 ? 200 : 503, problems.length === 0 ? 'ok\n' : `${problems.join('\n')}\n`);
      } else {
        send(404, 'not found: try /metrics, /healthz or /readyz\n');
      }
    };
    answer().catch((error: unknown) => {
      send(500, `${error instanceof Error ? error.message : String(error)}\n`);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}
