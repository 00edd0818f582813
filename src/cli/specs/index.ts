import type { CommandSpec } from '../options';
import { COMPLETION } from './completion';
import { DOCTOR } from './doctor';
import { DR_RESTORE } from './dr-restore';
import { FLEET } from './fleet';
import { MIRROR } from './mirror';
import { DELETE, LIST, PRUNE } from './image-sets';
import { RESTORE, VERIFY } from './restore';
import { SCHEDULE } from './schedule';
import { SETUP } from './setup';
import { SNAPSHOT } from './snapshot';
import { CANCEL, STATUS } from './status';
import { ARRIVAL_GUARD, THAW } from './thaw';
import { WORKER } from './worker';

/*
 * Every command's spec, in the order `vmsnap --help` lists them. Light on purpose: main.ts and
 * `vmsnap completion` read these without loading any command's code (the Temporal SDK, librbd).
 */
export const COMMAND_SPECS: readonly CommandSpec[] = [
  WORKER,
  SNAPSHOT,
  STATUS,
  CANCEL,
  THAW,
  SCHEDULE,
  LIST,
  PRUNE,
  DELETE,
  RESTORE,
  VERIFY,
  DR_RESTORE,
  FLEET,
  MIRROR,
  DOCTOR,
  SETUP,
  COMPLETION,
  ARRIVAL_GUARD,
];
