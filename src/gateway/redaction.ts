/**
 * What the gateway writes about an upstream exchange must never carry the caller's API key, even when
 * an upstream echoes it back (an error body quoting the request, a connection error naming it).
 *
 * Its own module, below both the upstream layer (which keeps the scrubbed body on its errors) and
 * observability (which logs it): neither imports the other for it.
 */

/** The text with every occurrence of `apiKey` replaced by `[redacted]`; unchanged without a key. */
export function redactApiKey(text: string | undefined, apiKey: string | undefined): string | undefined {
  if (text === undefined || apiKey === undefined || apiKey.length === 0 || !text.includes(apiKey))
    return text;
  return text.replaceAll(apiKey, '[redacted]');
}
