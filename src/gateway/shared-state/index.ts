export {
  createSharedState,
  evictionMessage,
  mayEvict,
  type SharedStateOptions,
} from './create-shared-state.js';
export type {
  AnswerStore,
  BudgetBucket,
  BudgetRead,
  BudgetRedisCheck,
  BudgetStore,
  BudgetWarning,
  BudgetWindowSpec,
  FlightCoordinator,
  MaybePromise,
  ScoreStore,
  SharedState,
  SharedStateStatus,
  SharedStateTopology,
} from './types.js';
