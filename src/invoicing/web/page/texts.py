"""The payment page's sentences that Python chooses (by status) or hands to pay.js, in the
request's language. The templates hold the rest; ``tests/unit/test_page_catalogues.py``
extracts both and checks every catalogue translates each one."""

from __future__ import annotations

from invoicing.web.page.i18n import PageLocale


def status_labels(locale: PageLocale) -> dict[str, str]:
    _ = locale.gettext.gettext
    return {
        "pending": _("Awaiting payment"),
        # pending with part of the amount received
        "partial": _("Partly paid"),
        "paid": _("Payment received"),
        "completed": _("Payment complete"),
        "expired": _("Expired"),
        "cancelled": _("Cancelled"),
    }


def done_texts(locale: PageLocale) -> dict[str, str]:
    _ = locale.gettext.gettext
    return {
        "paid": _("Thank you: your payment has arrived. You can close this page."),
        "completed": _("Thank you: this invoice is paid and settled. You can close this page."),
        "expired": _(
            "This invoice has expired. Please do not send funds to this address; "
            "ask the merchant for a new payment link."
        ),
        "cancelled": _("This invoice was cancelled. Please do not send funds to this address."),
    }


# After payment the page goes back to the shop after this many seconds, unless the payer
# stops it.
RETURN_COUNTDOWN_S = 10


def return_texts(locale: PageLocale, shop: str) -> dict[str, object]:
    """The countdown back to the shop: ``countdown[n]`` is the sentence with n seconds left
    (plural forms chosen here, by the catalogue's rules, so pay.js needs none)."""
    ngettext = locale.gettext.ngettext
    _ = locale.gettext.gettext
    return {
        "countdown": [
            ngettext(
                "Returning to %(shop)s in %(seconds)s second.",
                "Returning to %(shop)s in %(seconds)s seconds.",
                seconds,
            )
            % {"shop": shop, "seconds": locale.amount(str(seconds))}
            for seconds in range(RETURN_COUNTDOWN_S + 1)
        ],
        "stopped": _("Automatic return stopped. Use the link when you are ready."),
    }


def script_texts(locale: PageLocale, shop: str | None = None) -> dict[str, object]:
    """Everything pay.js writes, by key; ``%(name)s`` marks what the script fills in."""
    _ = locale.gettext.gettext
    return {
        "labels": status_labels(locale),
        "done": done_texts(locale),
        "countdown": _("(%(time)s left)"),
        "qrAlt": _("QR code of the payment request %(uri)s"),
        "copy": _("Copy address"),
        "copied": _("Copied"),
        "copyFailed": _("Copy failed"),
        "confirmInWallet": _("Confirm the request in your wallet…"),
        "rejected": _("You rejected the request in your wallet."),
        "unknownNetwork": _(
            "Your wallet does not know this network (%(network)s, chain ID %(chainId)s). "
            "Add it to your wallet and try again."
        ),
        "walletError": _("The wallet reported an error: %(error)s"),
        "sent": _("Transaction sent (%(hash)s). Waiting for the network to confirm it…"),
        "signInWallet": _("Sign the transfer in your wallet (no network fee)…"),
        "submitted": _(
            "Payment submitted (%(hash)s); the network fee is paid for you. Waiting for the "
            "network to confirm it…"
        ),
        "notSubmitted": _("The payment could not be submitted: %(error)s"),
        "receiptSaved": _("Your receipt will be emailed to %(email)s once the payment arrives."),
        "receiptFailed": _("The receipt could not be requested: %(error)s"),
        "number": locale.number_symbols(),
        "return": None if shop is None else return_texts(locale, shop),
    }
