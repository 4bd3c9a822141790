// Money as the service takes it: decimal strings in, bigints of raw units out. Never a float:
// Medusa hands amounts as numbers, strings or its BigNumber, all turned into an exact decimal
// string by bignumber.js before anything else reads them.
import type { BigNumberInput } from "@medusajs/framework/types";
import { MathBN } from "@medusajs/framework/utils";

const DECIMAL = /^[0-9]+(\.[0-9]+)?$/;

/** Medusa's amount as a positive decimal string with no exponent ("25", "10.5"). */
export function decimalString(amount: BigNumberInput): string {
  const value = MathBN.convert(amount);
  if (!value.isFinite() || value.isNegative() || value.isZero()) {
    throw new RangeError(`an amount must be positive, not ${value.toFixed()}`);
  }
  return value.toFixed();
}

/** A decimal string as an integer count of 10^-scale units. */
function scaled(decimal: string, scale: number): bigint {
  if (!DECIMAL.test(decimal)) throw new RangeError(`not a decimal amount: ${decimal}`);
  const [whole, fraction = ""] = decimal.split(".");
  if (fraction.length > scale) throw new RangeError(`${decimal} has more than ${scale} decimals`);
  return BigInt(whole + fraction.padEnd(scale, "0"));
}

function decimalsOf(decimal: string): number {
  return decimal.includes(".") ? decimal.split(".")[1].length : 0;
}

/**
 * The raw units of `part` of a price whose whole (`price`, same currency) locked `wholeRaw`:
 * wholeRaw * part / price, rounded down so that a refund never asks for more than was paid.
 */
export function rawShare(wholeRaw: bigint, part: string, price: string): bigint {
  const scale = Math.max(decimalsOf(part), decimalsOf(price));
  const partUnits = scaled(part, scale);
  const priceUnits = scaled(price, scale);
  if (partUnits > priceUnits) throw new RangeError(`${part} is more than the price ${price}`);
  return (wholeRaw * partUnits) / priceUnits;
}
