import express from 'express';
import { allowedMethods } from './allowed-methods';

describe('allowedMethods', () => {
  const app = express();
  app.get('/v1/payments/:id', (_request, response) => response.end());
  app.post('/v1/payments', (_request, response) => response.end());

  it('names the methods of the routes that match, HEAD wherever GET is', () => {
    expect(allowedMethods(app.router, '/v1/payments/pay_1')).toEqual(['GET', 'HEAD']);
    expect(allowedMethods(app.router, '/v1/payments')).toEqual(['POST']);
    expect(allowedMethods(app.router, '/nowhere')).toEqual([]);
  });

  it('matches no route at a path whose percent-encoding does not decode, rather than throwing', () => {
    expect(allowedMethods(app.router, '/v1/payments/%')).toEqual([]);
    expect(allowedMethods(app.router, '/v1/payments/%E0%A4%A')).toEqual([]);
  });
});
