import type { components, operations } from './generated/api-types.js';

/**
 * The shapes of the API, named: every one an alias of the types generated
 * from the OpenAPI document (generated/api-types.ts), none written by hand.
 */
type Schemas = components['schemas'];

export type Payment = Schemas['PaymentResource'];
export type Refund = Schemas['RefundResource'];
export type Event = Schemas['EventResource'];
export type EventType = Event['type'];
export type PaymentCreateParams = Schemas['CreatePaymentDto'];
export type RefundCreateParams = Schemas['CreateRefundDto'];
/** The `error` of every error answer. */
export type ErrorBody = Schemas['ErrorBody'];
export type ErrorCode = ErrorBody['code'];

type QueryOf<Operation extends keyof operations> = NonNullable<operations[Operation]['parameters']['query']>;
/** `limit` is the page size: the iterator fetches page after page. */
export type PaymentListParams = QueryOf<'PaymentsController_list'>;
export type RefundListParams = QueryOf<'RefundsController_list'>;
export type EventListParams = QueryOf<'EventsController_list'>;
