import { type ExecutionContext, createParamDecorator } from '@nestjs/common';
import type { Request } from 'express';
import { requestFingerprint } from './idempotency-key';

/** The fingerprint of the request as sent: method, route path and parsed JSON body. */
export const RequestFingerprint = createParamDecorator((_data: unknown, context: ExecutionContext): string => {
  const request = context.switchToHttp().getRequest<Request>();
  return requestFingerprint(request.method, request.path, request.body);
});
