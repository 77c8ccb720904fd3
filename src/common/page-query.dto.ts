import { Transform } from 'class-transformer';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsInt, IsOptional, Max, Min } from 'class-validator';

/**
 * A query value in decimal digits as a number; anything else (`0x10`, `1e1`,
 * ` 5 `, `abc`, a repeated parameter) stays as sent and fails the integer check,
 * where Number() would have read most of them as a number.
 */
function decimalInteger({ value }: { value: unknown }): unknown {
  return typeof value === 'string' && /^-?[0-9]+$/.test(value) ? Number(value) : value;
}

/** The page size every list takes; each list adds its own cursor and filters. */
export class PageQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 10, description: 'Page size, in decimal digits.' })
  @IsOptional()
  @Transform(decimalInteger)
  @IsInt({ message: 'limit must be an integer' })
  @Min(1, { message: 'limit must be at least 1' })
  @Max(100, { message: 'limit must be at most 100' })
  limit?: number;
}
