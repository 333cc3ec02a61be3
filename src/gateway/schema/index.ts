/** The gateway schema: each import registers its types and root field on the builder. */
import { builder } from './builder.js';
import './query.js';
import './json-scalar.js';
import './models.js';
import './is-null.js';
import './pi.js';
import './inference.js';
import './health.js';
import './budget.js';
import './model-scores.js';

export const schema = builder.toSchema();
