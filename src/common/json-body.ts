import type { IncomingMessage } from 'node:http';
import { rawBodyOf } from './raw-body';
import { storable } from './unicode';

type BodyProblem = { param: string; message: string };

/**
 * How deep a request body may nest. The payment body is two levels deep
 * (metadata); the cap keeps every later recursive walk (the reserved-key check,
 * class-transformer) far from the stack's limit.
 */
const MAX_DEPTH = 16;

/**
 * What JSON.parse accepts and this API refuses, found before anything else
 * reads the body: a number JSON cannot represent as a finite double (`1e309`
 * parses to Infinity, which has no canonical JSON, so no fingerprint), a
 * string or key that is not well-formed Unicode (a lone surrogate) or holds
 * U+0000 (Postgres text cannot store either), and nesting past MAX_DEPTH.
 * Walks without recursion, so any depth the parser produced is safe to check.
 * Returns the first problem with the path of the field at fault.
 */
export function bodyProblem(body: unknown): BodyProblem | undefined {
  const pending: { value: unknown; path: string; depth: number }[] = [{ value: body, path: '', depth: 0 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const { value, path, depth } = next;
    const where = path === '' ? 'the body' : path;
    if (typeof value === 'number' && !Number.isFinite(value)) {
      return { param: path, message: `${where} holds a number out of range.` };
    }
    if (typeof value === 'string' && !storable(value)) {
      return { param: path, message: `${where} holds a character that is not allowed (U+0000 or a lone surrogate).` };
    }
    if (typeof value === 'object' && value !== null) {
      if (depth >= MAX_DEPTH) return { param: path, message: `${where} is nested more than ${MAX_DEPTH} levels deep.` };
      for (const [key, child] of Object.entries(value)) {
        const childPath = path === '' ? key : `${path}.${key}`;
        if (!storable(key)) {
          return { param: path, message: `A key in ${where} holds a character that is not allowed (U+0000 or a lone surrogate).` };
        }
        pending.push({ value: child, path: childPath, depth: depth + 1 });
      }
    }
  }
  return undefined;
}

/**
 * An open object (its keys so far, and the key whose value is being read:
 * undefined while a key is awaited) or array (the index being read).
 */
type Container = { keys: Set<string>; key: string | undefined } | { keys: undefined; index: number };

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/**
 * The path (`metadata.k`) of the first key that a JSON text gives twice in one
 * object: JSON.parse silently keeps the last value, so what a request means
 * would depend on which copy a reader takes. Keys are compared as JSON.parse
 * reads them (`"a"` and `"\u0061"` are one key, decoded by JSON.parse itself).
 * A second pass over text JSON.parse accepted, not a parser: it tracks only
 * strings and the brackets outside them, without recursion.
 */
export function duplicateKey(text: string): string | undefined {
  const open: Container[] = [];
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === QUOTE) {
      const end = closingQuote(text, i);
      const container = open.at(-1);
      if (container?.keys && container.key === undefined) {
        const raw = text.slice(i + 1, end);
        const key = raw.includes('\\') ? (JSON.parse(text.slice(i, end + 1)) as string) : raw;
        if (container.keys.has(key)) return [...open.slice(0, -1).map(keyOrIndex), key].join('.');
        container.keys.add(key);
        container.key = key;
      }
      i = end;
    } else if (char === OPEN_OBJECT) {
      open.push({ keys: new Set(), key: undefined });
    } else if (char === OPEN_ARRAY) {
      open.push({ keys: undefined, index: 0 });
    } else if (char === CLOSE_OBJECT || char === CLOSE_ARRAY) {
      open.pop();
    } else if (char === COMMA) {
      const container = open[open.length - 1];
      if (container.keys) container.key = undefined;
      else container.index++;
    }
  }
  return undefined;
}

/** The index of the quote that ends the string opening at `start`: the next one not escaped by an odd run of backslashes. */
function closingQuote(text: string, start: number): number {
  for (let quote = text.indexOf('"', start + 1); ; quote = text.indexOf('"', quote + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return quote;
  }
}

function keyOrIndex(container: Container): string {
  return container.keys ? (container.key ?? '') : String(container.index);
}

/**
 * What is wrong with a body the parser accepted: what bodyProblem finds (so
 * nesting is capped before a path is built), then a key given twice in the
 * bytes keepRawBody kept.
 */
export function parsedBodyProblem(request: IncomingMessage & { body?: unknown }): BodyProblem | undefined {
  const bytes = rawBodyOf(request);
  const problem = request.body === undefined ? undefined : bodyProblem(request.body);
  if (problem || bytes === undefined) return problem;
  const duplicate = duplicateKey(bytes.toString('utf8'));
  return duplicate === undefined ? undefined : { param: duplicate, message: `${duplicate || 'A key'} is given more than once.` };
}
