export { OneJob, fingerprint } from "./onejob.js";
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
