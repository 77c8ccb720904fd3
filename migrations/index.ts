import { InitialSchema1795942800000 } from './1795942800000-InitialSchema';
import { KeyRetentionFromAnswer1796000000000 } from './1796000000000-KeyRetentionFromAnswer';
import { ReviewIsAState1796100000000 } from './1796100000000-ReviewIsAState';
import { ProviderEvents1796200000000 } from './1796200000000-ProviderEvents';
import { MerchantEvents1796300000000 } from './1796300000000-MerchantEvents';
import { ShardByClient1796400000000 } from './1796400000000-ShardByClient';
import { LimitsInTheSchema1796500000000 } from './1796500000000-LimitsInTheSchema';
import { EventsInCommitOrder1796600000000 } from './1796600000000-EventsInCommitOrder';
import { Refunds1796700000000 } from './1796700000000-Refunds';
import { TraceParent1796800000000 } from './1796800000000-TraceParent';
import { ApiKeys1796900000000 } from './1796900000000-ApiKeys';
import { WebhookEndpoints1797000000000 } from './1797000000000-WebhookEndpoints';
import { RetentionIndexes1797100000000 } from './1797100000000-RetentionIndexes';
import { ChecksPlannedOnce1797200000000 } from './1797200000000-ChecksPlannedOnce';
import { OneIndexPerLookup1797300000000 } from './1797300000000-OneIndexPerLookup';
import { EventCheckPlannedOnce1797400000000 } from './1797400000000-EventCheckPlannedOnce';
import { KeyCheckWithoutCount1797500000000 } from './1797500000000-KeyCheckWithoutCount';
import { EmptyMetadataChecked1797600000000 } from './1797600000000-EmptyMetadataChecked';
import { ColumnRulesAsDomains1797700000000 } from './1797700000000-ColumnRulesAsDomains';

/** Every migration, oldest first. Listed explicitly so the build needs no globbing. */
export const migrations = [
  InitialSchema1795942800000,
  KeyRetentionFromAnswer1796000000000,
  ReviewIsAState1796100000000,
  ProviderEvents1796200000000,
  MerchantEvents1796300000000,
  ShardByClient1796400000000,
  LimitsInTheSchema1796500000000,
  EventsInCommitOrder1796600000000,
  Refunds1796700000000,
  TraceParent1796800000000,
  ApiKeys1796900000000,
  WebhookEndpoints1797000000000,
  RetentionIndexes1797100000000,
  ChecksPlannedOnce1797200000000,
  OneIndexPerLookup1797300000000,
  EventCheckPlannedOnce1797400000000,
  KeyCheckWithoutCount1797500000000,
  EmptyMetadataChecked1797600000000,
  ColumnRulesAsDomains1797700000000,
];
