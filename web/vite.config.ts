// Builds the console into the Python package (console/web/dist), hashed names under /assets/.
import { defineConfig } from "vite";
import preact from "@preact/preset-vite";

export default defineConfig({
  plugins: [preact()],
  base: "/",
  build: {
    outDir: "../console/web/dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // a data: URL would need an inline exception; every asset is a file of its own
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    target: "es2020",
    sourcemap: false,
  },
});
