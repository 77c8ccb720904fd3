import { ApiProperty } from '@nestjs/swagger';
import { ErrorBody } from '../common/openapi';
import { RefundResource } from '../ledger/refund-resource';

class RefundFailedBody extends ErrorBody {
  @ApiProperty({ type: RefundResource, description: 'The failed refund.' })
  refund!: RefundResource;
}

/** A 402 `refund_failed`: the error envelope with the failed refund in it. */
export class RefundFailedEnvelope {
  @ApiProperty({ type: RefundFailedBody })
  error!: RefundFailedBody;
}

/** A page of refunds, newest first. */
export class RefundList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [RefundResource] })
  data!: RefundResource[];

  @ApiProperty({ description: 'Whether a page follows: ask again with starting_after = the last id.' })
  has_more!: boolean;
}
