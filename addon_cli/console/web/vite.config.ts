// The page is built into ../static (served by addon_cli/console/server.py); every asset is
// bundled from node_modules, so the browser fetches nothing from outside the console.
import { defineConfig } from "vite";
import react from "@vitejs/plugin-react";

export default defineConfig({
  plugins: [react()],
  base: "/",
  build: { outDir: "../static", emptyOutDir: true, assetsDir: "assets" },
});
