import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { randomRequestId, requestIdOf } from '../../src/gateway/request/facts.js';

/** A version 4 UUID of the RFC 9562 variant, in canonical lower-case text (what `randomUUID` makes). */
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('the generated request id', () => {
  it("has crypto.randomUUID's format, and no two alike", () => {
    expect(randomUUID()).toMatch(UUID_V4);
    const ids = new Set<string>();
    for (let i = 0; i < 1000; i++) {
      const id = randomRequestId();
      expect(id).toMatch(UUID_V4);
      ids.add(id);
    }
    expect(ids.size).toBe(1000);
  });

  it('uses every hex digit in every free position (the random bits are all used)', () => {
    const seen = Array.from({ length: 36 }, () => new Set<string>());
    for (let i = 0; i < 4000; i++) {
      const id = randomRequestId();
      for (let at = 0; at < 36; at++) seen[at]?.add(id[at] as string);
    }
    for (let at = 0; at < 36; at++) {
      const size = seen[at]?.size;
      if (at === 8 || at === 13 || at === 18 || at === 23) expect(size).toBe(1);
      else if (at === 14) expect(size).toBe(1);
      else if (at === 19) expect(size).toBe(4);
      else expect(size).toBe(16);
    }
  });

  it("keeps the caller's sane x-request-id, else makes one", () => {
    expect(requestIdOf('abc-123_x.y')).toBe('abc-123_x.y');
    expect(requestIdOf('no spaces')).toMatch(UUID_V4);
    expect(requestIdOf(undefined)).toMatch(UUID_V4);
  });
});
