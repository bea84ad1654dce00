import { DocumentConflictError } from '../ports/state-store.ts';
import type { SealingKeys } from './sealing-keys.ts';
import type { DocumentStore } from './stored-cluster-state.ts';

/**
 * A store whose documents (a provider's state of a cluster: its CA and member keys among them) are
 * sealed on the way in and opened on the way out, so whoever reads the store without this host's
 * key file finds no secret. Everything else goes to the store as it is.
 */
export function sealedDocuments<S extends DocumentStore>(store: S, keys: SealingKeys): S {
  // Typed as the whole DocumentStore: a document method added to it fails to compile until it seals here too.
  const sealed: DocumentStore = {
    getDocument: async (scope, key) => {
      const value = await store.getDocument(scope, key);
      return value === undefined ? undefined : keys.open(context(scope, key), value);
    },
    putDocument: (scope, key, value) => store.putDocument(scope, key, keys.seal(context(scope, key), value)),
    putDocuments: async (scope, puts, deletes, condition) => {
      const sealedPuts = puts.map((d) => ({ key: d.key, value: keys.seal(context(scope, d.key), d.value) }));
      if (condition === undefined) return store.putDocuments(scope, sealedPuts, deletes);
      // Sealing is randomized: the store compares the stored text, so the condition is the text this
      // reads and opens to the value required. A write in between changes that text: still refused.
      const stored = await store.getDocument(scope, condition.key);
      const opened = stored === undefined ? undefined : keys.open(context(scope, condition.key), stored);
      if (opened !== condition.value) throw new DocumentConflictError(scope, condition.key);
      return store.putDocuments(scope, sealedPuts, deletes, { key: condition.key, value: stored });
    },
    deleteDocument: (scope, key) => store.deleteDocument(scope, key),
    listDocuments: async (scope) => (await store.listDocuments(scope)).map((d) => ({ key: d.key, value: keys.open(context(scope, d.key), d.value) })),
  };
  return new Proxy(store, {
    get(target, property) {
      if (Object.hasOwn(sealed, property)) return sealed[property as keyof DocumentStore];
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

export interface Resealed {
  /** Documents in the scope. */
  documents: number;
  /** Those sealed again with the first key: they were plain, or sealed with another key. */
  resealed: number;
}

/**
 * Seals every document of `scope` not yet sealed with the first key again with it, so the other keys
 * can leave the key file. The caller holds the cluster's lease: nothing else writes the scope meanwhile.
 */
export async function resealScope(store: DocumentStore, keys: SealingKeys, scope: string): Promise<Resealed> {
  const documents = await store.listDocuments(scope);
  let resealed = 0;
  for (const { key, value } of documents) {
    if (keys.isCurrent(value)) continue;
    await store.putDocument(scope, key, keys.seal(context(scope, key), keys.open(context(scope, key), value)));
    resealed += 1;
  }
  return { documents: documents.length, resealed };
}

/** What a sealed value is bound to: its document. */
function context(scope: string, key: string): string {
  return `${scope}/${key}`;
}
