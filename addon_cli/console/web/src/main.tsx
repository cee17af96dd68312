// The console's page: PatternFly's page layout around the fleet view.
import "@patternfly/react-core/dist/styles/base.css";
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  Masthead,
  MastheadBrand,
  MastheadContent,
  MastheadMain,
  Page,
} from "@patternfly/react-core";
import { whoami } from "./api";
import { FleetView } from "./FleetView";
import { IntentView } from "./IntentView";
import { ModelForm } from "./ModelForm";
import { StackForm } from "./StackForm";
import { StorageForm } from "./StorageForm";

/** The page the address names: an intent's, or the fleet. */
function Route() {
  const query = new URLSearchParams(window.location.search);
  if (window.location.pathname === "/intent") {
    return (
      <IntentView
        kind={query.get("kind") ?? ""}
        namespace={query.get("namespace") ?? ""}
        name={query.get("name") ?? ""}
      />
    );
  }
  if (window.location.pathname === "/stack") {
    return <StackForm namespace={query.get("namespace") ?? ""} name={query.get("name") ?? ""} />;
  }
  if (window.location.pathname === "/new-storage") {
    return <StorageForm namespace={query.get("namespace") ?? ""} />;
  }
  if (window.location.pathname === "/new-model") {
    return <ModelForm namespace={query.get("namespace") ?? ""} />;
  }
  return <FleetView />;
}

function App() {
  const [user, setUser] = useState("");
  useEffect(() => {
    whoami()
      .then((u) => setUser(u.username))
      .catch((err: Error) => setUser(`not signed in: ${err.message}`));
  }, []);
  const masthead = (
    <Masthead>
      <MastheadMain>
        <MastheadBrand>Model serving fleet</MastheadBrand>
      </MastheadMain>
      <MastheadContent>
        <span data-testid="user">{user}</span>
      </MastheadContent>
    </Masthead>
  );
  return (
    <Page masthead={masthead}>
      <Route />
    </Page>
  );
}

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
