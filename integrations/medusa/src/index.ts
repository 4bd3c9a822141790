// The module provider Medusa loads: `@invoicing/medusa-payment` in medusa-config.ts.
import { ModuleProvider, Modules } from "@medusajs/framework/utils";

import { InvoicingPaymentProvider } from "./service.js";

export { InvoicingPaymentProvider, sessionStatus } from "./service.js";
export type { InvoicingOptions } from "./options.js";

export default ModuleProvider(Modules.PAYMENT, { services: [InvoicingPaymentProvider] });
