import { InitialSchema1795942800000 } from './1795942800000-InitialSchema';

/** Every migration, oldest first. Listed explicitly so the build needs no globbing. */
export const migrations = [InitialSchema1795942800000];
