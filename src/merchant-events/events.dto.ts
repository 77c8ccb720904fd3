import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsIn, IsOptional, IsString, Matches } from 'class-validator';
import { PageQueryDto } from '../common/page-query.dto';
import { EVENT_ID_PATTERN, EVENT_TYPES, type EventType } from '../ledger/outbox';

export class ListEventsQueryDto extends PageQueryDto {
  @ApiPropertyOptional({ description: 'The id of the last event of the previous page.', pattern: EVENT_ID_PATTERN.source })
  @IsOptional()
  @IsString({ message: 'starting_after must be an event id' })
  @Matches(EVENT_ID_PATTERN, { message: 'starting_after must be an event id' })
  starting_after?: string;

  @ApiPropertyOptional({ enum: EVENT_TYPES, description: 'Only events of this type.' })
  @IsOptional()
  @IsIn(EVENT_TYPES, { message: `type must be one of ${EVENT_TYPES.join(', ')}` })
  type?: EventType;
}
