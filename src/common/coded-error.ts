export interface ErrorDetails {
  /** The request field at fault. */
  param?: string;
  /** Sent as Retry-After: when trying again can succeed. */
  retryAfterSeconds?: number;
  /** Sent as Allow: the methods the path does answer. */
  allow?: readonly string[];
}

/** An error with a stable code, which common/error-envelope.ts maps to HTTP. */
export abstract class CodedError<C extends string> extends Error {
  constructor(
    readonly code: C,
    message: string,
    readonly details: ErrorDetails = {},
  ) {
    super(message);
    this.name = new.target.name;
  }
}
