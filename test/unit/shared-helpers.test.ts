/** The small helpers more than one part of the code base uses: one copy each. */
import { describe, expect, it } from 'vitest';
import { redactApiKey } from '../../src/gateway/redaction.js';
import { decimalsOf } from '../../src/shared/decimals.js';
import { isPromise } from '../../src/shared/is-promise.js';
import { roundUsd } from '../../src/shared/usd.js';

describe('decimalsOf', () => {
  it('counts decimals', () => {
    expect(decimalsOf('3.14159')).toBe(5);
    expect(decimalsOf('3')).toBe(0);
    expect(decimalsOf('3.')).toBe(0);
    expect(decimalsOf('12.5')).toBe(1);
  });
});

describe('isPromise', () => {
  it('tells a value that comes later from one at hand', () => {
    // Thenables made without a `then` literal, which the linter rightly refuses in plain objects.
    const thenable = (then: unknown) => Object.defineProperty({}, 'then', { value: then });
    expect(isPromise(Promise.resolve(1))).toBe(true);
    expect(isPromise(thenable(() => {}))).toBe(true);
    for (const value of [undefined, null, 0, '', 'then', {}, thenable(1), [], () => {}])
      expect(isPromise(value)).toBe(false);
  });
});

describe('roundUsd', () => {
  it('rounds to a millionth of a cent', () => {
    expect(roundUsd(0.1 + 0.2)).toBe(0.3);
    expect(roundUsd(0.000000014)).toBe(0.00000001);
    expect(roundUsd(1234.5)).toBe(1234.5);
    expect(roundUsd(0)).toBe(0);
  });
});

describe('redactApiKey', () => {
  it('replaces every occurrence of the key, and nothing without one', () => {
    expect(redactApiKey('key sk-1 and sk-1 again', 'sk-1')).toBe('key [redacted] and [redacted] again');
    expect(redactApiKey('no key here', 'sk-1')).toBe('no key here');
    expect(redactApiKey('sk-1', undefined)).toBe('sk-1');
    expect(redactApiKey('sk-1', '')).toBe('sk-1');
    expect(redactApiKey(undefined, 'sk-1')).toBeUndefined();
  });
});
