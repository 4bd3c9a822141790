// Live payment page: status polling, expiry countdown, copy button and an EIP-1193
// "pay with browser wallet" button. The page is complete without this script.
(function () {
  "use strict";

  var LABELS = {
    pending: "Awaiting payment",
    paid: "Payment received",
    completed: "Payment complete",
    expired: "Expired",
    cancelled: "Cancelled"
  };
  var DONE = {
    paid: "Thank you: your payment has arrived. You can close this page.",
    completed: "Thank you: this invoice is paid and settled. You can close this page.",
    expired: "This invoice has expired. Please do not send funds to this address; " +
      "ask the merchant for a new payment link.",
    cancelled: "This invoice was cancelled. Please do not send funds to this address."
  };
  // Poll delay by status; settled invoices stop polling. Expired ones keep a slow poll
  // because a late full payment still turns them paid.
  var POLL_MS = { pending: 2000, paid: 5000, expired: 10000 };
  var TRANSFER_SELECTOR = "a9059cbb"; // transfer(address,uint256)

  var dataEl = document.getElementById("payment-data");
  var state = JSON.parse(dataEl.textContent);
  var statusUrl = dataEl.getAttribute("data-status-url");
  var qrUrl = dataEl.getAttribute("data-qr-url");
  var clockOffsetMs = 0;
  var pollTimer = null;
  var walletBusy = false;

  function $(id) { return document.getElementById(id); }
  function setText(id, text) { var el = $(id); if (el && el.textContent !== text) el.textContent = text; }

  function render(s) {
    var previous = state;
    state = s;
    var status = $("status");
    status.textContent = LABELS[s.status] || s.status;
    status.className = "status status-" + s.status;
    $("payment").setAttribute("data-status", s.status);
    setText("amount", s.amount);
    setText("remaining", s.remaining);
    setText("pay-remaining", s.remaining);
    var pending = s.status === "pending";
    $("pay-section").hidden = !pending;
    $("done-section").hidden = pending;
    setText("done-text", DONE[s.status] || "");
    if (previous.paymentUri !== s.paymentUri) {
      $("qr").src = qrUrl + "?r=" + encodeURIComponent(s.remainingRaw);
      $("qr").alt = "QR code of the payment request " + s.paymentUri;
      $("uri").href = s.paymentUri;
    }
    tick();
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function countdownText(ms) {
    var total = Math.floor(ms / 1000);
    var days = Math.floor(total / 86400);
    var h = Math.floor((total % 86400) / 3600);
    var m = Math.floor((total % 3600) / 60);
    var sec = total % 60;
    var clock = pad(h) + ":" + pad(m) + ":" + pad(sec);
    return "(" + (days > 0 ? days + "d " + clock : clock) + " left)";
  }

  function tick() {
    var el = $("countdown");
    if (state.status !== "pending") { el.hidden = true; return; }
    var left = state.expiresAt - (Date.now() + clockOffsetMs);
    if (left <= 0) {
      // The server will report expired at the next poll; show it right away.
      render(Object.assign({}, state, { status: "expired" }));
      return;
    }
    el.hidden = false;
    setText("countdown", countdownText(left));
  }

  function schedule(ms) {
    if (pollTimer !== null) clearTimeout(pollTimer);
    pollTimer = ms === undefined ? null : setTimeout(poll, ms);
  }

  function poll() {
    pollTimer = null;
    fetch(statusUrl, { cache: "no-store", headers: { Accept: "application/json" } })
      .then(function (response) {
        var date = response.headers.get("Date");
        if (date) clockOffsetMs = Date.parse(date) - Date.now();
        if (!response.ok) throw new Error("status " + response.status);
        return response.json();
      })
      .then(function (s) { render(s); schedule(POLL_MS[s.status]); })
      .catch(function () { schedule(5000); });
  }

  // Copy button ---------------------------------------------------------------------
  function copyAddress() {
    var address = state.paymentAddress;
    var button = $("copy");
    function done(ok) {
      button.textContent = ok ? "Copied" : "Copy failed";
      setTimeout(function () { button.textContent = "Copy address"; }, 2000);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(address).then(function () { done(true); }, function () { done(fallbackCopy(address)); });
    } else {
      done(fallbackCopy(address));
    }
  }

  function fallbackCopy(text) {
    var range = document.createRange();
    range.selectNodeContents($("address"));
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (e) { return false; }
  }

  // Browser wallet (EIP-1193) -------------------------------------------------------
  function word(hex) { return ("0".repeat(64) + hex).slice(-64); }

  function transferData(to, amount) {
    return "0x" + TRANSFER_SELECTOR + word(to.slice(2).toLowerCase()) + word(amount.toString(16));
  }

  function walletMessage(text, isError) {
    var el = $("wallet-message");
    el.textContent = text;
    el.className = isError ? "message error" : "message";
    el.hidden = !text;
  }

  function describe(error) {
    var code = error && error.code;
    if (code === 4001) return "You rejected the request in your wallet.";
    if (code === 4902) {
      return "Your wallet does not know this network (" + state.network + ", chain ID " +
        state.chainId + "). Add it to your wallet and try again.";
    }
    return "The wallet reported an error: " + ((error && error.message) || String(error));
  }

  function payTransaction(from) {
    var amount = BigInt(state.remainingRaw);
    if (state.tokenAddress === null) {
      return { from: from, to: state.paymentAddress, value: "0x" + amount.toString(16) };
    }
    return { from: from, to: state.tokenAddress, value: "0x0", data: transferData(state.paymentAddress, amount) };
  }

  async function payWithWallet() {
    var ethereum = window.ethereum;
    if (walletBusy || !ethereum) return;
    walletBusy = true;
    $("wallet").disabled = true;
    walletMessage("Confirm the request in your wallet…", false);
    try {
      var accounts = await ethereum.request({ method: "eth_requestAccounts" });
      if (!accounts || accounts.length === 0) throw new Error("the wallet shared no account");
      var chainId = await ethereum.request({ method: "eth_chainId" });
      if (parseInt(chainId, 16) !== state.chainId) {
        await ethereum.request({
          method: "wallet_switchEthereumChain",
          params: [{ chainId: "0x" + state.chainId.toString(16) }]
        });
      }
      var hash = await ethereum.request({ method: "eth_sendTransaction", params: [payTransaction(accounts[0])] });
      walletMessage("Transaction sent (" + hash + "). Waiting for the network to confirm it…", false);
      $("wallet-message").setAttribute("data-tx-hash", String(hash));
      schedule(500);
    } catch (error) {
      walletMessage(describe(error), true);
    } finally {
      walletBusy = false;
      $("wallet").disabled = false;
    }
  }

  // Start ---------------------------------------------------------------------------
  $("copy").hidden = false;
  $("copy").addEventListener("click", copyAddress);
  if (window.ethereum && typeof window.ethereum.request === "function") {
    $("wallet").hidden = false;
    $("wallet").addEventListener("click", payWithWallet);
  }
  tick();
  setInterval(tick, 1000);
  if (POLL_MS[state.status] !== undefined) schedule(POLL_MS[state.status]);
})();
