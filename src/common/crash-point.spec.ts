import fs from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../config/app-config';
import { CrashPoint } from './crash-point';

function setup(env: Record<string, string> = {}) {
  const sut = new CrashPoint(loadConfig({ NODE_ENV: 'test', ...env }));
  const kill = jest.spyOn(process, 'kill').mockImplementation(() => true);
  const write = jest.spyOn(fs, 'writeSync').mockImplementation(() => 0);
  const written = () => write.mock.calls.map(([, text]) => JSON.parse(String(text)) as Record<string, unknown>);
  return { sut, kill, write, written };
}

describe('CrashPoint', () => {
  afterEach(() => jest.restoreAllMocks());

  it('does nothing when CRASH_POINT is unset', () => {
    const { sut, kill, written } = setup();

    sut.reach('after_claim');
    sut.reach('before_outcome');

    expect(kill).not.toHaveBeenCalled();
    expect(written()).toEqual([]);
  });

  it('does nothing at the other points', () => {
    const { sut, kill } = setup({ CRASH_POINT: 'before_outcome' });

    sut.reach('after_claim');
    sut.reach('worker_mid_job');

    expect(kill).not.toHaveBeenCalled();
  });

  it('says where it stops, then sends the process SIGKILL', () => {
    const { sut, kill, write, written } = setup({ CRASH_POINT: 'worker_mid_job' });

    sut.reach('worker_mid_job', { paymentId: 'pay_1' });

    expect(written()).toEqual([
      { msg: 'crash point reached', crashPoint: 'worker_mid_job', signal: 'SIGKILL', pid: process.pid, paymentId: 'pay_1' },
    ]);
    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGKILL');
    expect(kill.mock.invocationCallOrder[0]).toBeGreaterThan(write.mock.invocationCallOrder[0]);
  });

  it('stalls with SIGSTOP when CRASH_POINT_SIGNAL says so', () => {
    const { sut, kill } = setup({ CRASH_POINT: 'after_claim', CRASH_POINT_SIGNAL: 'SIGSTOP' });

    sut.reach('after_claim');

    expect(kill).toHaveBeenCalledWith(process.pid, 'SIGSTOP');
  });

  describe('during_provider_call', () => {
    let server: Server;
    let received: string[];
    let url: string;

    beforeEach(async () => {
      received = [];
      server = createServer((request, response) => {
        let body = '';
        request.on('data', (chunk: Buffer) => (body += chunk.toString()));
        request.on('end', () => {
          received.push(body);
          response.end('{}');
        });
      });
      await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });

    afterEach(async () => {
      await new Promise((closed) => server.close(closed));
    });

    it('stops once the next request has been sent, not before, and only once', async () => {
      const { sut, kill, written } = setup({ CRASH_POINT: 'during_provider_call' });

      sut.reach('during_provider_call', { paymentId: 'pay_1' });
      expect(kill).not.toHaveBeenCalled();
      await fetch(`${url}/charges`, { method: 'POST', body: '{"amount":500}' });
      await fetch(`${url}/charges`, { method: 'POST', body: '{"amount":700}' });

      expect(kill).toHaveBeenCalledTimes(1);
      expect(kill).toHaveBeenCalledWith(process.pid, 'SIGKILL');
      expect(written()).toEqual([expect.objectContaining({ crashPoint: 'during_provider_call', paymentId: 'pay_1' })]);
      expect(received).toEqual(['{"amount":500}', '{"amount":700}']);
    });
  });
});
