export { createSharedState, type SharedStateOptions } from './create-shared-state.js';
export type {
  AnswerStore,
  BudgetBucket,
  BudgetStore,
  FlightCoordinator,
  MaybePromise,
  SharedState,
  SharedStateStatus,
} from './types.js';
