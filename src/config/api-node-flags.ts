/**
 * The V8 heap settings the API runs with, wherever it is started: package.json's
 * `start`, the Dockerfile, compose, `start:all`, and the process harness the
 * tests and the bench use (api-node-flags.spec.ts checks that they agree).
 *
 * Left to itself, V8 sizes the heap from the machine's memory: on a 24 GB host
 * the young generation takes 128 MB and old space is let fill with garbage up to
 * 150 MB before a full collection, so an API under steady load sat at 300-360 MB resident
 * with about 55 MB live. A 4 MB semi-space (8 MB young generation) and a
 * 128 MB old space hold it under 200 MB; an 8 MB semi-space left it at 205 MB
 * once the answer cache was full. What lives is the code, the pools and
 * the caches (REPLAY_CACHE_ENTRIES answers, about 1 kB each; AUTH_CACHE_KEYS):
 * raise --max-old-space-size with them, or V8 ends the process out of memory.
 */
export const API_NODE_FLAGS = ['--max-semi-space-size=4', '--max-old-space-size=128'] as const;
