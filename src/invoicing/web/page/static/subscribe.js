// The subscription pages (/subscribe/<id> and /subscribe/<id>/manage): connect the browser
// wallet (EIP-1193), give the subscriptions contract its allowance (an EIP-2612 permit the
// service relays, or an approve), sign the subscription, post it; or sign a cancellation and
// post it. Every sentence comes from the page (#page-text), in the page's language.
(function () {
  "use strict";
  var TEXT = JSON.parse(document.getElementById("page-text").textContent);
  var DATA = JSON.parse(document.getElementById("subscription-data").textContent);
  var MAX_UINT = (BigInt(1) << BigInt(256)) - BigInt(1);
  var APPROVE_SELECTOR = "095ea7b3";
  var NONCES_SELECTOR = "7ecebe00";
  var DOMAIN_FIELDS = [
    { name: "name", type: "string" }, { name: "version", type: "string" },
    { name: "chainId", type: "uint256" }, { name: "verifyingContract", type: "address" }
  ];
  var busy = false;

  function $(id) { return document.getElementById(id); }
  function fill(text, values) {
    return text.replace(/%\((\w+)\)s/g, function (all, name) {
      return Object.prototype.hasOwnProperty.call(values, name) ? String(values[name]) : all;
    });
  }
  function word(hex) { return ("0".repeat(64) + hex).slice(-64); }
  function message(text, isError) {
    var el = $("wallet-message");
    el.textContent = text;
    el.className = isError ? "message error" : "message";
    el.hidden = !text;
  }
  function describe(error) {
    var code = error && error.code;
    if (code === 4001) return TEXT.rejected;
    if (code === 4902) return fill(TEXT.unknownNetwork, { network: DATA.network, chainId: DATA.chainId });
    return fill(TEXT.walletError, { error: (error && error.message) || String(error) });
  }
  function setStatus(status) {
    $("status").textContent = TEXT.labels[status] || status;
    $("status").className = "status status-" + status.replace("_", "-");
  }

  async function account(ethereum) {
    var accounts = await ethereum.request({ method: "eth_requestAccounts" });
    if (!accounts || accounts.length === 0) throw new Error("the wallet shared no account");
    var chainId = await ethereum.request({ method: "eth_chainId" });
    if (parseInt(chainId, 16) !== DATA.chainId) {
      await ethereum.request({
        method: "wallet_switchEthereumChain", params: [{ chainId: "0x" + DATA.chainId.toString(16) }]
      });
    }
    return accounts[0];
  }

  // What the allowance covers: every period of a subscription that ends, else no cap (the
  // contract takes no more than each signed period's amount, once a period).
  function allowanceValue() {
    return DATA.maxPeriods > 0 ? BigInt(DATA.amountRaw) * BigInt(DATA.maxPeriods) : MAX_UINT;
  }

  async function signPermit(ethereum, owner) {
    message(TEXT.signPermit, false);
    var data = "0x" + NONCES_SELECTOR + word(owner.slice(2).toLowerCase());
    var nonce = BigInt(await ethereum.request({ method: "eth_call", params: [{ to: DATA.token, data: data }, "latest"] }));
    var deadline = Math.floor(Date.now() / 1000) + 3600;
    var value = allowanceValue().toString();
    var typed = {
      types: {
        EIP712Domain: DOMAIN_FIELDS,
        Permit: [
          { name: "owner", type: "address" }, { name: "spender", type: "address" },
          { name: "value", type: "uint256" }, { name: "nonce", type: "uint256" },
          { name: "deadline", type: "uint256" }
        ]
      },
      primaryType: "Permit",
      domain: { name: DATA.permit.name, version: DATA.permit.version, chainId: DATA.chainId, verifyingContract: DATA.token },
      message: { owner: owner, spender: DATA.spender, value: value, nonce: nonce.toString(), deadline: deadline }
    };
    var signature = await ethereum.request({ method: "eth_signTypedData_v4", params: [owner, JSON.stringify(typed)] });
    return { value: value, deadline: deadline, signature: signature };
  }

  async function approve(ethereum, owner) {
    message(TEXT.approve, false);
    var data = "0x" + APPROVE_SELECTOR + word(DATA.spender.slice(2).toLowerCase()) + word(allowanceValue().toString(16));
    var hash = await ethereum.request({ method: "eth_sendTransaction", params: [{ from: owner, to: DATA.token, data: data }] });
    for (;;) {
      var receipt = await ethereum.request({ method: "eth_getTransactionReceipt", params: [hash] });
      if (receipt) return;
      await new Promise(function (resolve) { setTimeout(resolve, 1000); });
    }
  }

  async function post(url, body) {
    var response = await fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body)
    });
    var answer = await response.json();
    if (!response.ok) throw new Error((answer.error && answer.error.message) || String(response.status));
    return answer.subscription;
  }

  async function subscribe() {
    var ethereum = window.ethereum;
    if (busy) return;
    if (!ethereum) { message(TEXT.noWallet, true); return; }
    busy = true;
    $("subscribe").disabled = true;
    message(TEXT.confirmInWallet, false);
    try {
      var owner = await account(ethereum);
      var body = {};
      if (DATA.permit) body.permit = await signPermit(ethereum, owner);
      else await approve(ethereum, owner);
      message(TEXT.signSubscription, false);
      body.signature = await ethereum.request({
        method: "eth_signTypedData_v4", params: [owner, JSON.stringify(DATA.typedData)]
      });
      message(TEXT.submitting, false);
      var subscription = await post(DATA.authorizationUrl, body);
      setStatus(subscription.status);
      message("", false);
      $("subscribe-section").hidden = true;
      $("done-section").hidden = false;
      $("done-section").focus();
    } catch (error) {
      var reason = (error && error.message) || String(error);
      message(error && error.code ? describe(error) : fill(TEXT.notSubscribed, { error: reason }), true);
    } finally {
      busy = false;
      $("subscribe").disabled = false;
    }
  }

  async function cancel() {
    var ethereum = window.ethereum;
    if (busy) return;
    if (!ethereum) { message(TEXT.noWallet, true); return; }
    busy = true;
    $("cancel").disabled = true;
    try {
      var signer = await account(ethereum);
      if (signer.toLowerCase() !== String(DATA.payer).toLowerCase()) {
        throw Object.assign(new Error(fill(TEXT.wrongAccount, { payer: DATA.payer })), { shown: true });
      }
      message(TEXT.signCancel, false);
      var signature = await ethereum.request({
        method: "eth_signTypedData_v4", params: [signer, JSON.stringify(DATA.cancelTypedData)]
      });
      var subscription = await post(DATA.cancellationUrl, { signature: signature });
      setStatus(subscription.status);
      message(TEXT.cancelled, false);
      return;
    } catch (error) {
      var reason = (error && error.message) || String(error);
      if (error && error.shown) message(reason, true);
      else message(error && error.code ? describe(error) : fill(TEXT.notCancelled, { error: reason }), true);
    } finally {
      busy = false;
    }
    $("cancel").disabled = false;
  }

  if ($("subscribe")) $("subscribe").addEventListener("click", subscribe);
  if ($("cancel")) $("cancel").addEventListener("click", cancel);
  if ($("done-section")) $("done-section").setAttribute("tabindex", "-1");
})();
