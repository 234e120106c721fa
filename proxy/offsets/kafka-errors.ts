/** The Kafka error codes the offset service answers with (see docs/errors.md). */
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { StoreFailingFastError } from './store-circuit.js';

/**
 * A compare-and-set that did not match. Kafka has no code for it; INVALID_COMMIT_OFFSET_SIZE is
 * non-retriable (so clients do not loop) and no broker of the supported versions sends it for
 * OffsetCommit, so it means exactly this when it comes from the proxy.
 */
export const CAS_MISMATCH = ErrorCode.INVALID_COMMIT_OFFSET_SIZE;

/**
 * A compare-and-set on a group that commits transactionally: its offsets are the broker's, which
 * has no conditional write, so the comparison cannot be kept atomic. INVALID_TXN_STATE is
 * non-retriable and no broker sends it for OffsetCommit.
 */
export const CAS_TRANSACTIONAL = ErrorCode.INVALID_TXN_STATE;

/** Kafka's offset.metadata.max.bytes default, counted in UTF-16 code units as the broker does. */
export const MAX_METADATA_LENGTH = 4096;

/** The code a client gets when the store failed: retriable, so clients retry by themselves. */
export function storeFailureCode(err: unknown): number {
  // Not COORDINATOR_NOT_AVAILABLE: clients drop the coordinator on it and stop heartbeating
  // until they found it again; the open circuit answers every commit, so they would starve.
  if (err instanceof StoreFailingFastError) return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS;
  if (err instanceof StoreUnavailableError) {
    return err.timedOut ? ErrorCode.REQUEST_TIMED_OUT : ErrorCode.COORDINATOR_NOT_AVAILABLE;
  }
  if (err instanceof StoreCorruptError) return ErrorCode.UNKNOWN_SERVER_ERROR;
  return ErrorCode.COORDINATOR_NOT_AVAILABLE;
}
