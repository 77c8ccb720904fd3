import { METHODS } from 'node:http';
import type { Router } from 'express';

/** What is read of an Express 5 router layer: its route, when it is one, and whether it matches a path. */
interface RouteLayer {
  route?: { methods: Record<string, boolean | undefined> };
  match(path: string): unknown;
}

/**
 * A route for every method is middleware mounted on a path (Nest mounts module
 * middleware, the request logger among them, with app.all(), which Express
 * records as each method Node knows): it says nothing of which methods the
 * path answers.
 */
function answersEveryMethod(methods: Record<string, boolean | undefined>): boolean {
  return methods._all === true || METHODS.every((method) => methods[method.toLowerCase()]);
}

/** A layer decodes the parameters it matches, and throws on percent-encoding that does not decode: such a path matches no route. */
function matches(layer: RouteLayer, path: string): boolean {
  try {
    return Boolean(layer.match(path));
  } catch (error) {
    if (error instanceof URIError) return false;
    throw error;
  }
}

/**
 * The methods the app's routes answer at a path, as Express dispatches them
 * (HEAD wherever GET is), sorted; none for a path that no route matches.
 * Express has no public way to ask which routes match a path, so this reads
 * the router's stack, as Express's own OPTIONS answer does; the e2e tests pin
 * it.
 */
export function allowedMethods(router: Router, path: string): string[] {
  const methods = new Set<string>();
  for (const layer of router.stack as unknown as RouteLayer[]) {
    if (!layer.route || answersEveryMethod(layer.route.methods) || !matches(layer, path)) continue;
    for (const [method, answered] of Object.entries(layer.route.methods)) {
      if (answered) methods.add(method.toUpperCase());
    }
  }
  if (methods.has('GET')) methods.add('HEAD');
  return [...methods].sort();
}
