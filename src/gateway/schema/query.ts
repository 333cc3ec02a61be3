/** The root Query type; its fields are added by the feature modules (builder.queryField). */
import { builder } from './builder.js';

builder.queryType({
  description:
    'Null checks and digits of pi from two model-backed REST services, with the truth checked by the gateway. ' +
    'The model-backed fields are nullable: one failing field leaves the others (partial results).',
});
