import { ApiProperty } from '@nestjs/swagger';
import { ErrorBody } from '../common/openapi';
import type { CreatePaymentDto } from './payments.dto';
import type { NewPayment } from '../ledger/payments.repository';
import { newPaymentId, providerKeyFor } from '../ledger/payment-id';
import { PaymentResource } from '../ledger/payment-resource';

class DeclineBody extends ErrorBody {
  @ApiProperty({ type: PaymentResource, description: 'The failed payment.' })
  payment!: PaymentResource;
}

/** A 402: the error envelope with the declined payment in it. */
export class DeclineEnvelope {
  @ApiProperty({ type: DeclineBody })
  error!: DeclineBody;
}

/** A page of payments, newest first. */
export class PaymentList {
  @ApiProperty({ enum: ['list'] })
  object!: 'list';

  @ApiProperty({ type: [PaymentResource] })
  data!: PaymentResource[];

  @ApiProperty({ description: 'Whether a page follows: ask again with starting_after = the last id.' })
  has_more!: boolean;
}

/** A new pending payment as a validated request describes it, with its own id and the provider key derived from it. */
export function newPendingPayment(clientId: string, body: CreatePaymentDto): NewPayment {
  const id = newPaymentId();
  return {
    id,
    clientId,
    amount: body.amount,
    currency: body.currency,
    paymentMethod: body.payment_method,
    orderId: body.order_id ?? null,
    description: body.description ?? null,
    metadata: body.metadata ?? {},
    providerKey: providerKeyFor(id),
  };
}
