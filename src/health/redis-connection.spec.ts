import { Logger } from '@nestjs/common';
import { eventually } from '../../test/support/eventually';
import { createFailFastRedis } from './redis-connection';

describe('createFailFastRedis', () => {
  afterEach(() => jest.restoreAllMocks());

  it('logs one structured line when Redis is unreachable, however many reconnections fail', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    // Nothing listens on port 1: every connection attempt is refused at once.
    const redis = createFailFastRedis({ redisUrl: 'redis://127.0.0.1:1', redisClusterNodes: undefined });
    let reconnections = 0;
    redis.on('reconnecting', () => reconnections++);
    try {
      await eventually(() => (reconnections >= 3 ? true : undefined), { what: 'three reconnections' });

      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0][0]).toMatchObject({
        msg: 'redis unreachable; readiness says down until it is back',
        err: { code: 'ECONNREFUSED' },
      });
    } finally {
      redis.disconnect();
    }
  });
});
