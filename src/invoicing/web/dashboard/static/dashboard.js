// The dashboard's progressive enhancement: sign-in with an EIP-1193 wallet, EIP-712 forms
// signed in the wallet, refunds sent from the wallet, and the CSRF header on every htmx request. No inline script: the
// page's Content-Security-Policy allows only this file and htmx from this origin.
(() => {
  "use strict";
  const csrf = () => {
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : null;
  };
  document.addEventListener("htmx:configRequest", (event) => {
    const token = csrf();
    if (token) event.detail.headers["x-csrf-token"] = token;
  });

  const postJson = async (url, body) => {
    const headers = { "content-type": "application/json", accept: "application/json" };
    const token = csrf();
    if (token) headers["x-csrf-token"] = token;
    const response = await fetch(url, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      credentials: "same-origin",
    });
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      const message = data && data.error ? data.error.message : `HTTP ${response.status}`;
      throw new Error(message);
    }
    return data;
  };

  const wallet = async () => {
    if (!window.ethereum) {
      throw new Error("No wallet found in this browser. Ask the operator for a login link.");
    }
    const accounts = await window.ethereum.request({ method: "eth_requestAccounts" });
    if (!accounts || !accounts.length) throw new Error("The wallet shared no account.");
    return accounts[0];
  };

  const walletChain = async () =>
    parseInt(await window.ethereum.request({ method: "eth_chainId" }), 16);

  const switchChain = async (chainId) => {
    if ((await walletChain()) === chainId) return;
    await window.ethereum.request({
      method: "wallet_switchEthereumChain",
      params: [{ chainId: "0x" + chainId.toString(16) }],
    });
  };

  const utf8Hex = (text) =>
    "0x" +
    Array.from(new TextEncoder().encode(text), (b) => b.toString(16).padStart(2, "0")).join("");

  const say = (element, text, failed) => {
    if (!element) return;
    element.textContent = text;
    element.classList.toggle("error", Boolean(failed));
  };

  const signIn = async (button) => {
    const status = document.getElementById("sign-in-status");
    button.disabled = true;
    try {
      say(status, "Waiting for the wallet…");
      const address = await wallet();
      const chainId = await walletChain();
      const field = document.getElementById("account");
      const account = field ? field.value.trim() : "";
      const prepared = await postJson("/dashboard/login/message", { address, chainId, account });
      say(status, "Sign the message in your wallet…");
      const signature = await window.ethereum.request({
        method: "personal_sign",
        params: [utf8Hex(prepared.message), address],
      });
      const done = await postJson("/dashboard/login", {
        message: prepared.message,
        signature,
        account,
      });
      say(status, "Signed in.");
      window.location.assign(done.redirect);
    } catch (error) {
      say(status, error.message || String(error), true);
      button.disabled = false;
    }
  };

  // A form with data-sign: its fields go to data-prepare, which answers the EIP-712 typed
  // data to sign; the wallet signs it and the signature goes to the form's action.
  const signAndSend = async (form) => {
    const status = form.querySelector("[data-status]");
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      const fields = Object.fromEntries(new FormData(form).entries());
      delete fields.csrf;
      const prepared = await postJson(form.dataset.prepare, fields);
      const address = await wallet();
      if (address.toLowerCase() !== prepared.owner.toLowerCase()) {
        throw new Error(`Switch the wallet to ${prepared.owner}: it signs for this dashboard.`);
      }
      await switchChain(prepared.chainId);
      say(status, "Sign in your wallet…");
      const signature = await window.ethereum.request({
        method: "eth_signTypedData_v4",
        params: [address, JSON.stringify(prepared.typedData)],
      });
      const done = await postJson(form.action, { ...prepared.submit, signature });
      say(status, done.message || "Sent.");
      form.dispatchEvent(new CustomEvent("signed", { bubbles: true }));
    } catch (error) {
      say(status, error.message || String(error), true);
    } finally {
      if (button) button.disabled = false;
    }
  };

  // A form with data-wallet-send: its fields go to data-prepare, which answers a transaction;
  // the wallet sends it (and pays its gas); once it is mined its hash goes to the form's
  // action, where the service checks it on chain.
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const minedReceipt = async (txHash) => {
    for (let i = 0; i < 600; i += 1) {
      const receipt = await window.ethereum.request({
        method: "eth_getTransactionReceipt",
        params: [txHash],
      });
      if (receipt) return receipt;
      await sleep(1000);
    }
    throw new Error(`Transaction ${txHash} is not mined yet: post it again later.`);
  };

  const sendFromWallet = async (form) => {
    const status = form.querySelector("[data-status]");
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    try {
      const fields = Object.fromEntries(new FormData(form).entries());
      delete fields.csrf;
      const prepared = await postJson(form.dataset.prepare, fields);
      const address = await wallet();
      if (address.toLowerCase() !== prepared.owner.toLowerCase()) {
        throw new Error(`Switch the wallet to ${prepared.owner}: it pays for this refund.`);
      }
      await switchChain(prepared.chainId);
      say(status, "Confirm the transfer in your wallet…");
      const txHash = await window.ethereum.request({
        method: "eth_sendTransaction",
        params: [prepared.tx],
      });
      say(status, `Waiting for transaction ${txHash} to be mined…`);
      await minedReceipt(txHash);
      const done = await postJson(form.action, { ...prepared.submit, txHash });
      say(status, done.message || "Recorded.");
      form.dispatchEvent(new CustomEvent("signed", { bubbles: true }));
    } catch (error) {
      say(status, error.message || String(error), true);
    } finally {
      if (button) button.disabled = false;
    }
  };

  document.addEventListener("click", (event) => {
    const button = event.target.closest("#sign-in");
    if (button) signIn(button);
    const copy = event.target.closest("[data-copy]");
    if (copy && navigator.clipboard) {
      navigator.clipboard.writeText(copy.dataset.copy).catch(() => {});
    }
  });
  // The brand form: the chosen logo file goes as base64 in the hidden "logo" field (the
  // API's field; the service checks and re-encodes it), since the form is urlencoded.
  const readBase64 = (file) =>
    new Promise((resolve, reject) => {
      const reader = new FileReader();
      reader.onload = () => resolve(String(reader.result).split(",", 2)[1] || "");
      reader.onerror = () => reject(reader.error);
      reader.readAsDataURL(file);
    });

  const sendWithLogo = async (form) => {
    const status = form.querySelector("[data-status]");
    const input = form.querySelector("input[type=file]");
    const file = input && input.files && input.files[0];
    try {
      if (file && file.size > Number(form.dataset.maxFileBytes)) {
        throw new Error(form.dataset.tooLarge);
      }
      form.querySelector("[data-logo-data]").value = file ? await readBase64(file) : "";
      say(status, "Saving…");
      form.submit();
    } catch (error) {
      say(status, error.message || String(error), true);
    }
  };

  document.addEventListener("input", (event) => {
    const picker = event.target.closest("input[data-color-for]");
    if (picker) document.getElementById(picker.dataset.colorFor).value = picker.value;
    const text = event.target.closest("input[name=accentColor]");
    const pair = text && document.querySelector(`input[data-color-for="${text.id}"]`);
    if (pair && /^#[0-9a-fA-F]{6}$/.test(text.value.trim())) {
      pair.value = text.value.trim().toLowerCase();
    }
  });

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (form.matches && form.matches("form[data-sign]")) {
      event.preventDefault();
      signAndSend(form);
    } else if (form.matches && form.matches("form[data-wallet-send]")) {
      event.preventDefault();
      sendFromWallet(form);
    } else if (form.matches && form.matches("form[data-logo-form]")) {
      event.preventDefault();
      sendWithLogo(form);
    }
  });
})();
