export { OneJob } from "./onejob.js";
export type {
  FetchOptions,
  IntentRecord,
  OneJobError,
  OneJobErrorName,
  OneJobEvent,
  OneJobOptions,
  ResumedIntent,
  RetryOptions,
} from "./onejob.js";
