// Signature mode (docs/integration/authentication.md): the canonical request message and its EIP-191 signature.
//
// message = "Service API Request Signature" + "\n" + canonical JSON, where the canonical JSON
// is {"action","ownerAddress","timestamp","payload"} in that order with no whitespace (what
// JSON.stringify writes). `payload` is the POST body without ownerAddress in the order sent,
// or the query parameters without ownerAddress in URL order; this client sends query values
// all as strings, a form the service always accepts.
import { Wallet } from "ethers";

export const MESSAGE_PREFIX = "Service API Request Signature";
export const API_KEY_HEADER = "x-service-api-key";
export const SIGNATURE_HEADER = "x-service-signature";
export const TIMESTAMP_HEADER = "x-service-timestamp";

/** The canonical JSON of one request (timestamp in ms, as a JSON integer). */
export function canonicalJson(action, ownerAddress, timestamp, payload) {
  return JSON.stringify({ action, ownerAddress, timestamp, payload });
}

/** The text the owner wallet personal_signs for one request. */
export function requestMessage(action, ownerAddress, timestamp, payload) {
  return `${MESSAGE_PREFIX}\n${canonicalJson(action, ownerAddress, timestamp, payload)}`;
}

/** Signs requests for one owner wallet: an ethers Signer (a Wallet, a browser wallet's
 * JsonRpcSigner) or a private key. */
export class RequestSigner {
  #signer;
  #lastTimestamp = 0;

  constructor(signer) {
    this.#signer = typeof signer === "string" ? new Wallet(signer) : signer;
    if (typeof this.#signer?.signMessage !== "function") {
      throw new TypeError("signer must be an ethers Signer or a private key");
    }
  }

  get signer() {
    return this.#signer;
  }

  /** Strictly increasing milliseconds: the service accepts each (owner, timestamp) once, so
   * two requests of one client never share one, even within a millisecond. */
  nextTimestamp() {
    this.#lastTimestamp = Math.max(this.#lastTimestamp + 1, Date.now());
    return this.#lastTimestamp;
  }

  async headers(action, ownerAddress, payload) {
    const timestamp = this.nextTimestamp();
    const signature = await this.#signer.signMessage(
      requestMessage(action, ownerAddress, timestamp, payload),
    );
    return { [SIGNATURE_HEADER]: signature, [TIMESTAMP_HEADER]: String(timestamp) };
  }

  toJSON() {
    return "RequestSigner";  // never the key
  }
}
