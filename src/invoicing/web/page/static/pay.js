// Live payment page: status polling, expiry countdown, copy button, an EIP-1193 "pay with
// browser wallet" button and, where offered, "pay without gas" (an EIP-3009 authorization
// the service relays). The page is complete without this script.
(function () {
  "use strict";

  // Every sentence comes from the page, in the payer's language (page-text); "%(name)s"
  // marks a value this script fills in.
  var TEXT = JSON.parse(document.getElementById("page-text").textContent);
  var LABELS = TEXT.labels;
  var DONE = TEXT.done;
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
  function fill(text, values) {
    return text.replace(/%\((\w+)\)s/g, function (all, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : all;
    });
  }
  // A decimal amount string as the server's Babel writes it for this language: integer
  // digits grouped by three, the language's separators, every fraction digit kept.
  function amount(text) {
    var parts = String(text).split(".");
    var whole = parts[0].replace(/\B(?=(\d{3})+(?!\d))/g, "\u0000");
    whole = whole.split("\u0000").join(TEXT.number.group);
    return parts.length > 1 ? whole + TEXT.number.decimal + parts[1] : whole;
  }
  // What the payer is shown to send: the raw amount rounded up to 6 significant digits,
  // never past the decimal point (invoices.amounts.round_up_shown), as a decimal string.
  function shown(raw, decimals) {
    var value = BigInt(raw);
    if (value <= 0n) return "0";
    var cut = Math.min(Math.max(value.toString().length - 6, 0), decimals);
    var unit = 10n ** BigInt(cut);
    value = ((value + unit - 1n) / unit) * unit;
    var scale = 10n ** BigInt(decimals);
    var fraction = (value % scale).toString().padStart(decimals, "0").replace(/0+$/, "");
    return (value / scale).toString() + (fraction ? "." + fraction : "");
  }
  function setText(id, text) { var el = $(id); if (el && el.textContent !== text) el.textContent = text; }

  function render(s) {
    var previous = state;
    state = s;
    var status = $("status");
    var partly = s.status === "pending" && BigInt(s.balanceRaw) > 0n;
    status.textContent = LABELS[partly ? "partial" : s.status] || s.status;
    status.className = "status status-" + s.status;
    $("payment").setAttribute("data-status", s.status);
    setText("amount", amount(shown(s.requiredRaw, s.decimals)));
    setText("remaining", amount(shown(s.remainingRaw, s.decimals)));
    setText("pay-remaining", amount(shown(s.remainingRaw, s.decimals)));
    var pending = s.status === "pending";
    $("expires-fact").hidden = !pending;
    $("copy").hidden = !pending;
    $("pay-section").hidden = !pending;
    $("done-section").hidden = pending;
    setText("done-text", DONE[s.status] || "");
    showReturn(s.status, withinReturnWindow(s.paidAt));
    if (previous.paymentUri !== s.paymentUri) {
      $("qr").src = qrUrl + "&r=" + encodeURIComponent(s.remainingRaw);
      $("qr").alt = fill(TEXT.qrAlt, { uri: s.paymentUri });
      $("uri").href = s.paymentUri;
    }
    tick();
  }

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  // Hours, minutes, seconds (more than a day shows more than 24 hours: no plural words).
  function countdownText(ms) {
    var total = Math.floor(ms / 1000);
    var h = Math.floor(total / 3600);
    var m = Math.floor((total % 3600) / 60);
    var sec = total % 60;
    return fill(TEXT.countdown, { time: pad(h) + ":" + pad(m) + ":" + pad(sec) });
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

  // Back to the shop ----------------------------------------------------------------
  // After payment: the link to redirectUrl and a countdown the payer can stop (announced
  // once when it starts and when it stops; the seconds themselves are not read out). The
  // countdown starts only while the invoice was paid less than the server's window ago (its
  // data-auto-return-until when the page was served, else paidAt read by a poll, on the
  // server's clock); later the link alone is shown.
  // Pending, expired, cancelled: the link to cancelUrl, no countdown.
  var returnTimer = null;
  var returnStopped = false;

  function withinReturnWindow(paidAt) {
    var box = $("return");
    if (!box || typeof paidAt !== "number") return false;
    var windowMs = Number(box.getAttribute("data-auto-return-window-ms"));
    return Date.now() + clockOffsetMs < paidAt + windowMs;
  }

  function showReturn(status, autoReturn) {
    var box = $("return");
    if (!box) return;
    var paid = status === "paid" || status === "completed";
    var url = paid ? box.getAttribute("data-redirect-url") : box.getAttribute("data-cancel-url");
    box.hidden = status === "pending" || !url;
    if (url) $("return-link").href = url;
    if (paid && url && autoReturn && TEXT["return"] && returnTimer === null && !returnStopped) {
      startReturn(url);
    }
    if (!paid && returnTimer !== null) stopReturn(false);
  }

  function startReturn(url) {
    var left = TEXT["return"].countdown.length - 1;
    setText("return-countdown", TEXT["return"].countdown[left]);
    setText("return-announce", TEXT["return"].countdown[left]);
    $("return-timer").hidden = false;
    returnTimer = setInterval(function () {
      left -= 1;
      setText("return-countdown", TEXT["return"].countdown[Math.max(left, 0)]);
      if (left <= 0) {
        clearInterval(returnTimer);
        window.location.assign(url);
      }
    }, 1000);
  }

  function stopReturn(byPayer) {
    clearInterval(returnTimer);
    returnTimer = null;
    $("return-timer").hidden = true;
    if (byPayer) {
      returnStopped = true;
      setText("return-announce", TEXT["return"].stopped);
      $("return-link").focus();
    }
  }

  // Copy button ---------------------------------------------------------------------
  function copyAddress() {
    var address = state.paymentAddress;
    var button = $("copy");
    function done(ok) {
      button.textContent = ok ? TEXT.copied : TEXT.copyFailed;
      setTimeout(function () { button.textContent = TEXT.copy; }, 2000);
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
    if (code === 4001) return TEXT.rejected;
    if (code === 4902) return fill(TEXT.unknownNetwork, { network: state.network, chainId: state.chainId });
    return fill(TEXT.walletError, { error: (error && error.message) || String(error) });
  }

  function payTransaction(from) {
    var amount = BigInt(state.remainingRaw);
    if (state.tokenAddress === null) {
      return { from: from, to: state.paymentAddress, value: "0x" + amount.toString(16) };
    }
    return { from: from, to: state.tokenAddress, value: "0x0", data: transferData(state.paymentAddress, amount) };
  }

  // The wallet's account, on the invoice's chain.
  async function walletAccount(ethereum) {
    var accounts = await ethereum.request({ method: "eth_requestAccounts" });
    if (!accounts || accounts.length === 0) throw new Error("the wallet shared no account");
    var chainId = await ethereum.request({ method: "eth_chainId" });
    if (parseInt(chainId, 16) !== state.chainId) {
      await ethereum.request({
        method: "wallet_switchEthereumChain",
        params: [{ chainId: "0x" + state.chainId.toString(16) }]
      });
    }
    return accounts[0];
  }

  async function payWithWallet() {
    var ethereum = window.ethereum;
    if (walletBusy || !ethereum) return;
    walletBusy = true;
    $("wallet").disabled = true;
    walletMessage(TEXT.confirmInWallet, false);
    try {
      var accounts = [await walletAccount(ethereum)];
      var hash = await ethereum.request({ method: "eth_sendTransaction", params: [payTransaction(accounts[0])] });
      walletMessage(fill(TEXT.sent, { hash: hash }), false);
      $("wallet-message").setAttribute("data-tx-hash", String(hash));
      schedule(500);
    } catch (error) {
      walletMessage(describe(error), true);
    } finally {
      walletBusy = false;
      $("wallet").disabled = false;
    }
  }

  // Pay without gas (EIP-3009) -----------------------------------------------------
  // The payer signs a TransferWithAuthorization of the amount due to the payment address
  // in the token's EIP-712 domain; the service's relayer submits it and pays the gas.
  var GASLESS_NAME = dataEl.getAttribute("data-gasless-name");
  var GASLESS_VERSION = dataEl.getAttribute("data-gasless-version");

  function randomNonce() {
    var bytes = new Uint8Array(32);
    window.crypto.getRandomValues(bytes);
    return "0x" + Array.prototype.map.call(bytes, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }

  function authorization(from) {
    var now = Math.floor((Date.now() + clockOffsetMs) / 1000);
    return {
      from: from, to: state.paymentAddress, value: String(state.remainingRaw),
      validAfter: String(now - 60), validBefore: String(now + 600), nonce: randomNonce()
    };
  }

  function typedData(message) {
    return {
      types: {
        EIP712Domain: [
          { name: "name", type: "string" }, { name: "version", type: "string" },
          { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" }
        ],
        TransferWithAuthorization: [
          { name: "from", type: "address" }, { name: "to", type: "address" },
          { name: "value", type: "uint256" }, { name: "validAfter", type: "uint256" },
          { name: "validBefore", type: "uint256" }, { name: "nonce", type: "bytes32" }
        ]
      },
      primaryType: "TransferWithAuthorization",
      domain: { name: GASLESS_NAME, version: GASLESS_VERSION, chainId: state.chainId, verifyingContract: state.tokenAddress },
      message: message
    };
  }

  async function payWithoutGas() {
    var ethereum = window.ethereum;
    if (walletBusy || !ethereum) return;
    walletBusy = true;
    $("gasless").disabled = true;
    walletMessage(TEXT.signInWallet, false);
    try {
      var account = await walletAccount(ethereum);
      var message = authorization(account);
      var signature = await ethereum.request({
        method: "eth_signTypedData_v4", params: [account, JSON.stringify(typedData(message))]
      });
      var body = Object.assign({ chainId: state.chainId, tokenAddress: state.tokenAddress, signature: signature }, message);
      var response = await fetch(statusUrl.replace(/\/status$/, "/authorization"), {
        method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body)
      });
      var answer = await response.json();
      if (!response.ok) throw new Error((answer.error && answer.error.message) || String(response.status));
      walletMessage(fill(TEXT.submitted, { hash: answer.txHash }), false);
      $("wallet-message").setAttribute("data-tx-hash", String(answer.txHash));
      schedule(500);
    } catch (error) {
      var reason = (error && error.message) || String(error);
      walletMessage(error && error.code ? describe(error) : fill(TEXT.notSubmitted, { error: reason }), true);
    } finally {
      walletBusy = false;
      $("gasless").disabled = false;
    }
  }

  // A receipt by email (offered when the shop sends them): the address goes to the
  // receipt route; the page's policy allows no form submission, so only this sends it.
  async function askReceipt(event) {
    event.preventDefault();
    var form = $("receipt-form");
    var email = $("receipt-email").value.trim();
    var message = $("receipt-message");
    $("receipt-send").disabled = true;
    try {
      var response = await fetch(form.getAttribute("data-url"), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: email }),
      });
      var answer = await response.json();
      if (!response.ok) throw new Error((answer.error && answer.error.message) || String(response.status));
      message.textContent = fill(TEXT.receiptSaved, { email: answer.email });
      message.classList.remove("error");
    } catch (error) {
      message.textContent = fill(TEXT.receiptFailed, { error: (error && error.message) || String(error) });
      message.classList.add("error");
    } finally {
      $("receipt-send").disabled = false;
    }
  }

  // Start ---------------------------------------------------------------------------
  if ($("receipt-form")) {
    $("receipt-form").hidden = false;
    $("receipt-form").addEventListener("submit", askReceipt);
  }
  $("copy").hidden = state.status !== "pending";
  $("copy").addEventListener("click", copyAddress);
  if (window.ethereum && typeof window.ethereum.request === "function") {
    $("wallet").hidden = false;
    $("wallet").addEventListener("click", payWithWallet);
    if (GASLESS_NAME && $("gasless")) {
      $("gasless").hidden = false;
      $("gasless").addEventListener("click", payWithoutGas);
    }
  }
  if ($("return-stop")) $("return-stop").addEventListener("click", function () { stopReturn(true); });
  showReturn(state.status, !!$("return") && $("return").hasAttribute("data-auto-return-until"));
  tick();
  setInterval(tick, 1000);
  if (POLL_MS[state.status] !== undefined) schedule(POLL_MS[state.status]);
})();
