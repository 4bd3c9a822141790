"""The merchant's brand on the payment page: display name, logo and accent colour."""
