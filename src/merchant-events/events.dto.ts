import { IsIn, IsOptional, IsString, Matches } from 'class-validator';
import { PageQueryDto } from '../common/page-query.dto';
import { EVENT_ID_PATTERN, EVENT_TYPES, type EventType } from './event';

export class ListEventsQueryDto extends PageQueryDto {
  @IsOptional()
  @IsString({ message: 'starting_after must be an event id' })
  @Matches(EVENT_ID_PATTERN, { message: 'starting_after must be an event id' })
  starting_after?: string;

  @IsOptional()
  @IsIn(EVENT_TYPES, { message: `type must be one of ${EVENT_TYPES.join(', ')}` })
  type?: EventType;
}
