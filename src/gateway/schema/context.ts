/**
 * The GraphQL context of one operation: its state (`Operation`), its loaders, the digit engine and
 * the limits the resolvers check. A fresh object per operation, made by `createContextFactory`'s
 * function; the fast path and Yoga's context hook both use it.
 *
 * A plain object of own properties: Yoga merges it into its own context with Object.assign, which
 * would drop prototype getters (and call getters eagerly); the lazy parts live on `loaders`.
 */
import type { DigitEngine } from '../../digits/digit-engine.js';
import type { BudgetWindowStatus } from '../cost/cost-budget.js';
import type { Caller } from '../identity.js';
import type { ModelsView } from '../models/model-scoring.js';
import type { Operation } from '../operation/operation.js';
import type { UpstreamClients } from '../upstream/clients.js';
import { createLoaders, type Loaders, type OnDedup } from './loaders.js';

/** Limits the resolvers check before any upstream call. */
export interface SchemaLimits {
  /** Most digits a `pi`/`inference` field may ask for (MAX_DIGITS). */
  maxDigits: number;
  /** Most decimal places `correctDigits` compares (MAX_DIGITS, capped by what the digit engine serves). */
  maxCompareDigits: number;
  /** Deepest nesting of a JSON argument. */
  maxJsonDepth: number;
  /** Largest serialized size (UTF-8 bytes) of a JSON argument. */
  maxJsonBytes: number;
}

/** A caller's budget windows (cost control's), undefined when no budget applies to it. */
export type BudgetStatusOf = (
  caller: Caller,
) => BudgetWindowStatus[] | undefined | Promise<BudgetWindowStatus[] | undefined>;

export interface GatewayContext {
  operation: Operation;
  loaders: Loaders;
  digits: DigitEngine;
  limits: SchemaLimits;
  /** The `budget` field's figures (calls nothing upstream). */
  budgetStatus: BudgetStatusOf;
  /** The `models` field's figures, and routing for a field the admission did not route. */
  models: ModelsView;
}

export interface ContextFactoryOptions {
  clients: UpstreamClients;
  digits: DigitEngine;
  limits: SchemaLimits;
  onDedup: OnDedup;
  /** @default no budget for anyone */
  budgetStatus?: BudgetStatusOf | undefined;
  /** @default no scoreboard: no rows, and every call keeps its default model */
  models?: ModelsView | undefined;
}

const noBudget: BudgetStatusOf = () => undefined;
const noModels: ModelsView = { rows: async () => [], route: (call) => call.model };

/** `(operation) => context`, with everything shared made once. */
export function createContextFactory(
  options: ContextFactoryOptions,
): (operation: Operation) => GatewayContext {
  const { clients, digits, limits, onDedup } = options;
  const budgetStatus = options.budgetStatus ?? noBudget;
  const models = options.models ?? noModels;
  return (operation) => ({
    operation,
    loaders: createLoaders(clients, operation, onDedup, models),
    digits,
    limits,
    budgetStatus,
    models,
  });
}
