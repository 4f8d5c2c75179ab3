document.getElementById("app").textContent = "x";
