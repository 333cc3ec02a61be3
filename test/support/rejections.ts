/** What a promise that must fail failed with. */

/** The reason `promise` rejected with; a promise that resolves fails the test ('expected a rejection'). */
export async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a rejection');
    },
    (error: unknown) => error,
  );
}
