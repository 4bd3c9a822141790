// The Medusa application of test/server.test.ts: the payment module with this provider only,
// on the PostgreSQL database and with the provider options the test passes in the environment.
const { defineConfig } = require("@medusajs/framework/utils");

module.exports = defineConfig({
  projectConfig: {
    databaseUrl: process.env.DATABASE_URL,
    http: { storeCors: "*", adminCors: "*", authCors: "*", jwtSecret: "test", cookieSecret: "test" },
  },
  admin: { disable: true },
  modules: [{
    resolve: "@medusajs/medusa/payment",
    options: {
      providers: [{
        resolve: require.resolve("../../dist/src/index.js"),
        id: "invoicing",
        options: JSON.parse(process.env.INVOICING_PROVIDER_OPTIONS),
      }],
    },
  }],
});
