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
export function bodyProblem(body: unknown): { param: string; message: string } | undefined {
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

/** In a `u` regular expression a surrogate pair is one code point, so \p{Cs} matches only a lone surrogate. */
const LONE_SURROGATE = /\p{Cs}/u;

function storable(text: string): boolean {
  return !text.includes('\u0000') && !LONE_SURROGATE.test(text);
}
