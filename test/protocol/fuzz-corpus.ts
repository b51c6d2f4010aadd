// The capsule fuzzer's generators, shared by the decoder fuzz test
// (test/protocol/fuzz.test.ts), the native fast-path decoder's
// (test/native/fast-decode.test.ts) and the soak's live fuzzing: one seeded
// recipe in bench/soak/mutate.ts, so every run sees the same inputs.
export { mutate, prng, randomCapsule } from '../../bench/soak/mutate.js';
