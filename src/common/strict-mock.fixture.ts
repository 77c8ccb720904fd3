/**
 * A mock whose every method must be stubbed before use: a call the test did not
 * expect fails loudly instead of returning undefined, so "the provider was not
 * called" is proven by the absence of a stub.
 *
 * A fixture, like payment.fixture.ts: tsconfig.build.json leaves it out of the
 * build, whose types do not include jest's.
 */
export function strictMock<T extends object>(name: string): jest.Mocked<T> {
  return new Proxy({} as jest.Mocked<T>, {
    get(stubs, property) {
      if (property in stubs) return stubs[property as keyof T];
      // Not methods: `then` is probed by await, symbols by jest's printers.
      if (property === 'then' || typeof property === 'symbol') return undefined;
      throw new Error(`${name}.${String(property)}() was called but not stubbed`);
    },
  });
}
