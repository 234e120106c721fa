import { describe, expect, it } from 'vitest';
import { ErrorCode, errorInfo } from './error-codes.js';

describe('Kafka error table', () => {
  it('has the well-known codes', () => {
    expect(ErrorCode.NONE).toBe(0);
    expect(ErrorCode.UNKNOWN_SERVER_ERROR).toBe(-1);
    expect(ErrorCode.NOT_COORDINATOR).toBe(16);
    expect(ErrorCode.UNKNOWN_MEMBER_ID).toBe(25);
    expect(ErrorCode.UNSUPPORTED_VERSION).toBe(35);
    expect(ErrorCode.GROUP_ID_NOT_FOUND).toBe(69);
    expect(ErrorCode.STALE_MEMBER_EPOCH).toBe(113);
  });

  it('covers every code from -1 to the highest without gaps or duplicates', () => {
    const codes = Object.values(ErrorCode).sort((a, b) => a - b);
    expect(new Set(codes).size).toBe(codes.length);
    codes.forEach((c, i) => expect(c).toBe(i - 1));
    expect(codes.at(-1)).toBeGreaterThanOrEqual(130);
  });

  it('reports name and retriability', () => {
    expect(errorInfo(14)).toEqual({ code: 14, name: 'COORDINATOR_LOAD_IN_PROGRESS', retriable: true });
    expect(errorInfo(25).retriable).toBe(false);
    expect(errorInfo(9999)).toEqual({ code: 9999, name: 'UNKNOWN_9999', retriable: false });
  });
});
