// The rblk wire protocol, versions 1 to 3: capsule codecs shared by target and initiator.
// docs/protocol.md is the normative description of every byte.

export * from './constants.js';
export { ProtocolError, type ProtocolErrorReason } from './errors.js';
export type { DataDescriptor } from './fields.js';
export { PROTOCOL_LIMITS, type CapsuleHeader, type WireLimits } from './header.js';
export { remoteDataOf } from './remote-data.js';
export {
  connectDataBuffer,
  decodeConnectData,
  encodeConnectData,
  type ConnectAcceptData,
  type ConnectData,
  type ConnectRejectData,
  type ConnectRequestData,
} from './connect-data.js';
export {
  checkLoginGrant,
  decodeLoginReject,
  decodeLoginRequest,
  decodeLoginResponse,
  encodeLoginReject,
  encodeLoginRequest,
  encodeLoginResponse,
  sessionLimits,
  type LoginReject,
  type LoginRequest,
  type LoginResponse,
} from './login.js';
export {
  decodeLoginAuth,
  decodeLoginChallenge,
  encodeLoginAuth,
  encodeLoginChallenge,
  type LoginAuth,
  type LoginChallenge,
} from './login-challenge.js';
export {
  initiatorProof,
  MIN_SECRET_LENGTH,
  newNonce,
  targetProof,
  verifyInitiatorProof,
  verifyTargetProof,
  type AuthSecret,
  type AuthTranscript,
} from './auth.js';
export { decodeCommand, encodeCommand, transferLength, type CommandCapsule, type CommandData } from './command.js';
export { decodeResponse, encodeResponse, type Residual, type ResponseCapsule } from './response.js';
export {
  decodeTaskManagement,
  decodeTaskManagementResponse,
  encodeTaskManagement,
  encodeTaskManagementResponse,
  type TaskManagement,
  type TaskManagementResponse,
} from './task-management.js';
export {
  encodeCreditRequest,
  encodeHeaderOnly,
  encodeTargetLogout,
  type CreditRequest,
  type CreditResponse,
  type HeaderOnlyCapsule,
  type InitiatorLogout,
  type KeepAlive,
  type KeepAliveResponse,
  type TargetLogout,
} from './session-control.js';
export { capsuleBuffer, decodeCapsule, encodeCapsule, encodedLength, type Capsule, type DecodeOptions } from './capsule.js';
export { splitTrain } from './train.js';
